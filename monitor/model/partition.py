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

from dataclasses import dataclass
from typing import Any

from monitor.model import rules
from monitor.model._emit import Emitter
from monitor.model.config import ModelConfig
from monitor.model.events import PartitionMeta, ReplicaReport
from monitor.model.findings import Finding, FindingKind
from monitor.model.state import EpochEntry, PartitionState, ReplicaState, TopicConfig

K = FindingKind


@dataclass(frozen=True, slots=True)
class Context:
    """What a partition's transition needs beyond its own state."""

    config: ModelConfig
    topic: TopicConfig | None = None

    @property
    def min_isr(self) -> int:
        if self.topic is not None:
            return self.topic.min_insync_replicas
        return self.config.default_min_insync_replicas

    @property
    def min_isr_known(self) -> bool:
        return self.topic is not None


def new_state(cluster: str, topic: str, partition: int) -> PartitionState:
    return PartitionState(cluster=cluster, topic=topic, partition=partition)


def step(
    state: PartitionState, event: PartitionMeta | ReplicaReport, ctx: Context
) -> tuple[PartitionState, list[Finding]]:
    """Apply one event to one partition's state."""
    out: list[Finding] = []
    emit = Emitter(state.cluster, state.topic, state.partition, state.open, out)
    if isinstance(event, PartitionMeta):
        applied = _apply_meta(state, event, ctx, emit)
    else:
        applied = _apply_replica(state, event, ctx, emit)
    if applied:
        t = event.observed_at
        emit.condition(K.STALE_TELEMETRY, False, t)
        if isinstance(event, PartitionMeta):
            evaluate_conditions(state, t, ctx, emit)  # leadership/ISR change touches all
        elif event.broker == state.leader:
            for b, rs in state.replica_states.items():  # lags are measured against the leader
                _replica_conditions(state, b, rs, t, ctx, emit)
            _hw_condition(state, t, ctx, emit)
        else:
            rs = state.replica_states[event.broker]
            _replica_conditions(state, event.broker, rs, t, ctx, emit)
    return state, out


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
    if s.leader_epoch >= 0 and ev.leader_epoch < s.leader_epoch:
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

    prev_isr, prev_elr, prev_epoch = s.isr, s.eligible_leader_replicas, s.leader_epoch
    prev_leader = s.leader if s.leader is not None else _last_leader(s)
    s.meta_at = t
    s.last_seen = max(s.last_seen, t)
    s.replicas = ev.replicas
    s.offline_replicas = ev.offline_replicas
    s.eligible_leader_replicas = ev.eligible_leader_replicas or ()
    s.leader = ev.leader
    if ev.log_start_offset is not None:
        s.log_start_offset = ev.log_start_offset

    if prev_epoch < 0:
        s.leader_epoch = ev.leader_epoch
        s.lineage.append(EpochEntry(ev.leader_epoch, -1, ev.leader, t))
        s.isr = ev.isr
        if ev.leader is not None:
            _reset_leader_measurements(s, t)
    else:
        if ev.leader_epoch > prev_epoch:
            s.leader_epoch = ev.leader_epoch
            if ev.leader is not None and ev.leader != prev_leader:
                _on_election(s, ev, prev_leader, prev_epoch, prev_isr, prev_elr, ctx, emit)
            else:
                # Epoch bumped without a new leader (leader lost, or an older KRaft bumping
                # the epoch on ISR changes): a new lineage entry, not an election.
                start = s.leader_leo() if ev.leader is not None else -1
                _append_lineage(s, EpochEntry(ev.leader_epoch, start, ev.leader, t), ctx)
        _isr_change(s, prev_isr, ev.isr, t, emit)
        s.isr = ev.isr

    if ev.epoch_start_offset is not None and ev.leader_epoch == s.leader_epoch:
        _epoch_start_known(s, ev.epoch_start_offset, t, emit)
        for i in range(len(s.lineage) - 1, -1, -1):
            e = s.lineage[i]
            if e.epoch == ev.leader_epoch:
                if e.start_offset != ev.epoch_start_offset:
                    s.lineage[i] = e._replace(start_offset=ev.epoch_start_offset)
                break
    if ev.high_watermark is not None:
        _observe_hw(s, ev.high_watermark, t, ctx, emit)
    return True


def _last_leader(s: PartitionState) -> int | None:
    for entry in reversed(s.lineage):
        if entry.leader is not None:
            return entry.leader
    return None


def _forget_incarnation(s: PartitionState) -> None:
    """After an epoch regression, the offsets seen so far belong to another log."""
    s.leader_epoch = -1
    s.isr = ()
    s.prev_isr = ()
    s.hw = s.max_hw = s.hw_at = -1
    s.suspect_hw = -1
    s.replica_states.clear()
    s.leader_leo_history.clear()
    s.pending_loss_check = None
    s.sampled_loss_basis = None


def _append_lineage(s: PartitionState, entry: EpochEntry, ctx: Context) -> None:
    s.lineage.append(entry)
    if len(s.lineage) > ctx.config.lineage_limit:
        del s.lineage[0]


def _isr_change(
    s: PartitionState, before: tuple[int, ...], after: tuple[int, ...], t: int, emit: Emitter
) -> None:
    removed = [b for b in before if b not in after]
    added = [b for b in after if b not in before]
    if not removed and not added:
        return
    s.prev_isr = before
    details = {"isr_before": list(before), "isr": list(after), "replicas": list(s.replicas)}
    if removed:
        emit.event(K.ISR_SHRINK, t, {**details, "removed": removed})
    if added:
        emit.event(K.ISR_EXPAND, t, {**details, "added": added})


def _on_election(
    s: PartitionState,
    ev: PartitionMeta,
    prev_leader: int | None,
    prev_epoch: int,
    prev_isr: tuple[int, ...],
    prev_elr: tuple[int, ...],
    ctx: Context,
    emit: Emitter,
) -> None:
    t, leader = ev.observed_at, ev.leader
    assert leader is not None
    unclean = rules.is_unclean_election(leader, prev_isr, prev_elr, ev.isr)
    prev_rs = s.replica_states.get(prev_leader) if prev_leader is not None else None
    prev_leader_leo = prev_rs.leo if prev_rs is not None else -1
    leader_rs = s.replica_states.get(leader)
    new_leo = -1
    basis = "before"
    if ev.epoch_start_offset is not None:
        # The leader's own record of where its epoch began: its log end at the election,
        # whatever its last sample said (it may have truncated on restart since).
        new_leo, basis = ev.epoch_start_offset, "epoch"
        if leader_rs is not None and leader_rs.leo > new_leo:
            _on_truncation(s, leader, leader_rs, new_leo, t, emit)
            leader_rs.leo = new_leo
        if leader_rs is not None:
            leader_rs.suspect_leo = -1
    elif leader_rs is not None:
        if leader_rs.suspect_leo >= 0:
            # Its latest sample was lower than the one before (it restarted and truncated);
            # leadership now rests on that latest sample, so believe it -- and say what that
            # truncation removed, as a second sample would have.
            _on_truncation(s, leader, leader_rs, leader_rs.suspect_leo, t, emit)
            leader_rs.leo, leader_rs.suspect_leo = leader_rs.suspect_leo, -1
        new_leo = leader_rs.leo
    committed = s.max_hw
    _append_lineage(s, EpochEntry(ev.leader_epoch, new_leo, leader, t), ctx)
    s.election_times.append(t)
    del s.election_times[: max(0, len(s.election_times) - 4 * ctx.config.flapping_elections)]
    details = {
        "epoch_before": prev_epoch,
        "epoch": ev.leader_epoch,
        "epochs_skipped": max(0, ev.leader_epoch - prev_epoch - 1),
        "leader_before": prev_leader,
        "leader": leader,
        "isr_before": list(prev_isr),
        "eligible_leader_replicas_before": list(prev_elr),
        "clean": not unclean,
        "start_offset": new_leo,
        "committed_hw_before": committed,
    }
    emit.event(K.LEADER_ELECTION, t, details, broker=leader)
    if unclean:
        emit.event(K.UNCLEAN_ELECTION, t, details, broker=leader)
    reported = False
    if new_leo >= 0:
        reported = _check_loss(
            s, committed, new_leo, t, ev.leader_epoch, not unclean, basis, emit, prev_leader_leo
        )
        # Replicas holding more than the new leader must truncate to its start offset.
        for b, rs in s.replica_states.items():
            rs.must_truncate_to = new_leo if b != leader and rs.leo > new_leo else -1
    # The LEO judged above may be stale (or unknown): the new leader's first sample under the
    # new epoch checks again, so the verdict does not depend on which report came first --
    # unless the leader said where its epoch began (exact: nothing to check again).
    exact = basis == "epoch"
    s.pending_loss_check = None if reported or exact else (ev.leader_epoch, committed, not unclean)
    s.sampled_loss_basis = (
        None
        if exact or new_leo < 0
        else (ev.leader_epoch, new_leo, committed, not unclean, prev_leader_leo)
    )
    s.leader = leader
    _reset_leader_measurements(s, t)


def _epoch_start_known(s: PartitionState, start: int, t: int, emit: Emitter) -> None:
    """The leader's record of where its epoch began, after the election was judged on a
    sample. If it began lower than that sample, the new leader had truncated in between
    (a restart): report that truncation and the committed offsets it adds to the loss."""
    basis, s.sampled_loss_basis = s.sampled_loss_basis, None
    if basis is None or basis[0] != s.leader_epoch or start >= basis[1]:
        return
    epoch, used, committed, clean, leader_before_leo = basis
    if start < committed:
        _emit_truncation(s, s.leader, used, start, committed, epoch, t, emit)
    top = min(used, committed)
    if start < top:
        emit.event(
            K.COMMITTED_DATA_LOSS,
            t,
            {
                "committed_hw_before": committed,
                "new_leader": s.leader,
                "new_leader_leo": start,
                "lost_from": start,
                "lost_to": top,
                "lost_count": top - start,
                "epoch": epoch,
                "clean_election": clean,
                "leader_before_leo": leader_before_leo,
                # Added to the loss already reported from the sample: together they are
                # the exact loss [start, committed).
                "old_leader_offsets_lost": top - start,
                "leo_sampled": "epoch",
                "correction_of_sampled_leo": used,
            },
        )
    if s.max_hw <= used:
        s.max_hw = start  # rebased on what the new leader really held


def _reset_leader_measurements(s: PartitionState, t: int) -> None:
    """A new leader: its LEO is the reference now; followers get a fresh lag clock.

    Kafka resets every follower's lastCaughtUpTime when leadership changes, for the
    same reason: lag against the old leader says nothing about the new one.
    """
    leo = s.leader_leo()
    s.epoch_started_at = t
    s.leader_leo_history = [(t, leo)] if leo >= 0 else []
    for rs in s.replica_states.values():
        rs.lag_ms = 0
        rs.caught_up_at = t
        rs.ahead_samples = 0
    s.hw_caught_up_at = t
    s.hw_lag_ms = 0
    s.suspect_hw = -1


def _check_loss(
    s: PartitionState,
    committed: int,
    new_leader_leo: int,
    t: int,
    epoch: int,
    clean: bool,
    basis: str,
    emit: Emitter,
    leader_before_leo: int = -1,
) -> bool:
    lost = rules.committed_offsets_lost(committed, new_leader_leo)
    if lost is None:
        return False
    # What the old leader held at its last sample (acks=1 writes included) and the new
    # leader does not: committed loss <= this <= acknowledged loss, up to what the old
    # leader acknowledged after that sample.
    old_leader_lost = max(leader_before_leo, committed) - new_leader_leo
    emit.event(
        K.COMMITTED_DATA_LOSS,
        t,
        {
            "committed_hw_before": committed,
            "new_leader": s.leader if basis == "after" else _leader_of_epoch(s, epoch),
            "new_leader_leo": new_leader_leo,
            "lost_from": lost[0],
            "lost_to": lost[1],
            "lost_count": lost[1] - lost[0],
            "epoch": epoch,
            "clean_election": clean,
            "leader_before_leo": leader_before_leo,
            "old_leader_offsets_lost": old_leader_lost,
            # "epoch": the leader's record of where its epoch began (OffsetsForLeaderEpoch):
            # exact. "before": the new leader's last LEO sample before the election (an
            # upper bound if it grew since, exact when it had stalled -- but blind to a
            # truncation between that sample and the election);
            # "after": its first sample under the new epoch (may include new writes: a
            # lower bound).
            "leo_sampled": basis,
        },
    )
    # The log is rebased: later HWs are measured against what the new leader holds.
    s.max_hw = new_leader_leo
    return True


def _leader_of_epoch(s: PartitionState, epoch: int) -> int | None:
    for entry in reversed(s.lineage):
        if entry.epoch == epoch:
            return entry.leader
    return None


# --- replica reports (each broker's view of its own log) -----------------------------------


def _apply_replica(s: PartitionState, ev: ReplicaReport, ctx: Context, emit: Emitter) -> bool:
    rs = s.replica_states.get(ev.broker)
    if rs is None:
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

    if (
        ev.broker == s.leader
        and s.pending_loss_check is not None
        and t >= s.epoch_started_at
        and _recheck_loss(s, rs, leo, t, ctx, emit)
    ):
        return True
    if 0 <= leo < rs.leo:
        if rs.suspect_leo < 0:
            rs.suspect_leo = leo  # wait for a second sample before believing it
            return True
        _on_truncation(s, ev.broker, rs, leo, t, emit)
    rs.suspect_leo = -1
    rs.leo = leo
    if rs.must_truncate_to >= 0 and leo <= rs.must_truncate_to:
        rs.must_truncate_to = -1  # truncated to the new epoch's start, as Kafka should

    if ev.broker == s.leader:
        _on_leader_sample(s, leo, t, ctx, emit)
        if ev.high_watermark is not None and ev.high_watermark > s.hw and t >= s.hw_at:
            # The leader's own report: fresh enough to measure HW lag, but never compared
            # with the metadata HW for regressions -- two sources sampled at different
            # moments disagree by design (the ``partition`` event's HW is authoritative).
            s.hw, s.hw_at = ev.high_watermark, t
            _measure_hw(s, t)
    else:
        _measure_follower(s, rs, t, ctx)
    return True


def _recheck_loss(
    s: PartitionState, rs: ReplicaState, leo: int, t: int, ctx: Context, emit: Emitter
) -> bool:
    """The new leader's first sample under its epoch: its log end, without a second witness.

    Returns True when the sample has been fully applied here (a lower LEO was accepted).
    """
    assert s.pending_loss_check is not None
    epoch, committed, clean = s.pending_loss_check
    s.pending_loss_check = None
    if epoch != s.leader_epoch:
        return False
    for i in range(len(s.lineage) - 1, -1, -1):
        e = s.lineage[i]
        if e.epoch == epoch and (e.start_offset < 0 or leo < e.start_offset):
            s.lineage[i] = e._replace(start_offset=leo)
    if not 0 <= leo < rs.leo:
        _check_loss(s, committed, leo, t, epoch, clean, "after", emit)
        return False
    # Lower than the sample the election was judged on: that one was stale. Accept it.
    _on_truncation(s, s.leader if s.leader is not None else -1, rs, leo, t, emit)
    rs.leo, rs.suspect_leo = leo, -1
    _check_loss(s, committed, leo, t, epoch, clean, "after", emit)
    _on_leader_sample(s, leo, t, ctx, emit)
    return True


def _on_truncation(
    s: PartitionState, broker: int, rs: ReplicaState, leo: int, t: int, emit: Emitter
) -> None:
    committed = s.max_hw
    # Truncating down to the new epoch's start is the leader-epoch protocol at work: what it
    # removes is the old epoch's divergent suffix (already counted when it was lost).
    floor = committed if rs.must_truncate_to < 0 else min(committed, rs.must_truncate_to)
    seen = (s.leader_epoch, rs.leo, leo)
    if committed >= 0 and leo < floor and rs.last_truncation != seen:
        rs.last_truncation = seen
        _emit_truncation(s, broker, rs.leo, leo, committed, s.leader_epoch, t, emit)


def _emit_truncation(
    s: PartitionState,
    broker: int | None,
    leo_before: int,
    leo: int,
    committed: int,
    epoch: int,
    t: int,
    emit: Emitter,
) -> None:
    emit.event(
        K.TRUNCATION_BELOW_HW,
        t,
        {
            "leo_before": leo_before,
            "leo": leo,
            "committed_hw": committed,
            "committed_offsets_removed": min(leo_before, committed) - leo,
            "leader": s.leader,
            "epoch": epoch,
        },
        broker=broker,
    )


def _on_leader_sample(s: PartitionState, leo: int, t: int, ctx: Context, emit: Emitter) -> None:
    hist = s.leader_leo_history
    hist.append((t, leo))
    if len(hist) > ctx.config.leo_history:
        del hist[0]
    for b, rs in s.replica_states.items():
        if b != s.leader:
            _measure_follower(s, rs, t, ctx)
            # A follower sampled (under this leadership) *before* this leader sample, yet
            # holding more than the leader: impossible unless their logs differ. Strictly
            # before: samples with the same stamp were read concurrently (the collector
            # stamps a round's JMX reads with the round's start), in an unknown order.
            if s.epoch_started_at <= rs.observed_at < t and rs.leo > leo:
                if rs.ahead_samples == 0:
                    rs.ahead_since = t
                rs.ahead_samples += 1
    _measure_hw(s, t)


def _measure_follower(s: PartitionState, rs: ReplicaState, now: int, ctx: Context) -> None:
    if rs.leo < 0 or not s.leader_leo_history:
        return
    leader_leo = s.leader_leo_history[-1][1]
    rs.lag_offsets = max(0, leader_leo - rs.leo)
    behind_since = rules.time_behind(s.leader_leo_history, rs.leo, now)
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
        s.max_hw = hw
    s.suspect_hw = -1
    # Within a leadership the HW only grows: a lower value than the leader's own report
    # (a replica event) is an older read, not news -- regressions are judged above.
    if hw >= s.hw or s.hw_at < s.epoch_started_at:
        s.hw = hw
    s.hw_at = t
    s.max_hw = max(s.max_hw, hw)
    _measure_hw(s, t)


def _measure_hw(s: PartitionState, now: int) -> None:
    if s.hw < 0 or not s.leader_leo_history:
        return
    behind_since = rules.time_behind(s.leader_leo_history, s.hw, now)
    if behind_since is None:
        s.hw_caught_up_at = now
        s.hw_lag_ms = 0
    else:
        s.hw_lag_ms = max(0, now - max(behind_since, s.hw_caught_up_at))


# --- conditions ------------------------------------------------------------------------------


def evaluate_conditions(s: PartitionState, t: int, ctx: Context, emit: Emitter) -> None:
    """(Re)evaluate every condition of the partition from its current state."""
    _isr_conditions(s, t, ctx, emit)
    for b, rs in s.replica_states.items():
        _replica_conditions(s, b, rs, t, ctx, emit)
    _hw_condition(s, t, ctx, emit)
    _flapping(s, t, ctx, emit)


def _isr_conditions(s: PartitionState, t: int, ctx: Context, emit: Emitter) -> None:
    """What the metadata alone says: offline, under-replicated, under / at min ISR."""
    online = s.leader is not None
    isr, replicas = s.isr, s.replicas
    min_isr = ctx.min_isr

    def isr_details() -> dict[str, Any]:
        return {
            "isr": list(isr),
            "isr_size": len(isr),
            "min_isr": min_isr,
            "replicas": list(replicas),
        }

    emit.condition(
        K.OFFLINE,
        bool(replicas) and rules.is_offline(s.leader),
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
        online and rules.is_under_replicated(isr, replicas),
        t,
        lambda: {
            "isr": list(isr),
            "replicas": list(replicas),
            "missing": [b for b in replicas if b not in isr],
        },
    )
    emit.condition(
        K.UNDER_MIN_ISR, bool(replicas) and rules.is_under_min_isr(isr, min_isr), t, isr_details
    )
    emit.condition(
        K.AT_MIN_ISR,
        online and ctx.min_isr_known and rules.is_at_min_isr(isr, replicas, min_isr),
        t,
        isr_details,
    )


def _replica_conditions(
    s: PartitionState, b: int, rs: ReplicaState, t: int, ctx: Context, emit: Emitter
) -> None:
    """A follower's lag and divergence."""
    cfg = ctx.config
    follower = s.leader is not None and b != s.leader and b in s.replicas
    emit.condition(
        K.FOLLOWER_LAG,
        follower
        and rules.is_lagging(
            rs.lag_ms, rs.lag_offsets, cfg.follower_lag_ms, cfg.follower_lag_offsets
        ),
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
    # A replica known to hold more than the new epoch's start (an old leader coming back)
    # is ahead until it truncates -- a few seconds under the leader-epoch protocol. Only if
    # it stays ahead for longer than Kafka lets a follower lag is that a divergence.
    expected_to_truncate = cfg.epoch_truncation and rs.must_truncate_to >= 0
    ahead = rs.ahead_samples >= 2 and (
        not expected_to_truncate or t - rs.ahead_since > cfg.follower_lag_ms
    )
    emit.condition(
        K.LOG_DIVERGENCE,
        follower
        and (ahead or (not cfg.epoch_truncation and rs.must_truncate_to >= 0 and b in s.isr)),
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
    emit.condition(
        K.HW_LAG,
        s.leader is not None and s.hw >= 0 and s.hw_lag_ms > ctx.config.hw_lag_ms,
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
