"""Elections: who leads now, whether that was clean, and what committed data was lost.

A loss is judged only on evidence not older than the committed HW it is compared with
(``C``, the highest HW seen, and when it was seen):

1. **the epoch record** -- the new leader's own record of where its epoch began
   (OffsetsForLeaderEpoch for the previous epoch, sent by the collector as
   ``epoch_start_offset``): its log end at the election, exact;
2. **a LEO sample of the new leader stamped at or after C's sample**: its log end as
   sampled -- exact when it had stopped fetching, an upper bound once it leads (it appends).

The new leader's log is valid only up to where an earlier epoch began if it held more than
that epoch's start and was never seen to truncate to it nor to rejoin the ISR since (a stale
former leader elected uncleanly: its suffix is another epoch's records, not the committed
ones).

An election is decided at once when the evidence is there (the epoch record; or a sample at
or above C: nothing lost). A sample *below* C indicates a loss; the exact epoch record is
awaited for ``epoch_record_wait_ms`` before the loss is judged on the sample. Without any
evidence the election is **pending** (the ``election_pending`` condition, info: visible in
``explain`` and ``status``, never paged) until it arrives -- or, after
``election_evidence_wait_ms``, it is reported as ``election_unverified`` (warning: the loss is
unknown). Nothing unconfirmed is paged, so nothing paged is withdrawn; a verdict on a sample
is refined when the epoch record arrives later (the offsets it adds are reported as a
correction, see docs/findings.md).

Unclean, from every witness: the new leader was in neither the last ISR nor the ELR, nor
does the new ISR hold any of them or say a reassignment handed over to it
(:func:`monitor.model.rules.election_membership`); or a loss was proven at an election
membership did not call unclean that no observed truncation of the new leader explains (a
clean election cannot lose committed data).

Pure, like the rest of the model: no clock (``t`` is event time or the tick's ``now``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from monitor.model import rules
from monitor.model._emit import Emitter
from monitor.model.config import ModelConfig
from monitor.model.events import PartitionMeta
from monitor.model.findings import FindingKind, Severity
from monitor.model.state import ElectionCheck, EpochEntry, PartitionState, ReplicaState

K = FindingKind


@dataclass(frozen=True, slots=True)
class Before:
    """The partition as the metadata showed it before the election's event.

    ``meta_at``: when that metadata was read (it still showed the old leadership): a sample
    of the new leader taken before then is certainly from before the election."""

    leader: int | None
    epoch: int
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    adding: tuple[int, ...]
    meta_at: int
    #: Its replicas (empty: not known).
    replicas: tuple[int, ...] = ()


def start_election(
    s: PartitionState,
    before: Before,
    ev: PartitionMeta,
    config: ModelConfig,
    emit: Emitter,
    unclean_allowed: bool = True,
    leader_back_at: int = -1,
) -> None:
    """``ev`` shows a new leader at a new epoch: report the election, then judge it (or
    wait). ``unclean_allowed``: the topic's ``unclean.leader.election.enable`` (callers
    pass Kafka's default, false, when not known); ``leader_back_at``: when the new leader's
    broker last came back (a restart witnessed, -1: none) -- see :func:`on_epoch_record`."""
    assert ev.leader is not None
    leader, epoch, t = ev.leader, ev.leader_epoch, ev.observed_at
    epoch_record = ev.epoch_start_offset
    prev_leader, prev_epoch = before.leader, before.epoch
    membership = rules.election_membership(
        leader, before.isr, before.elr, ev.isr, before.adding, before.replicas, unclean_allowed
    )
    # Only a leader outside the last ISR whose new ISR holds none of it, that no
    # reassignment was adding, on a topic that allows unclean elections, is unclean by
    # membership; the others are judged by their log (witness loss).
    clean = membership != "outside_last_isr"
    prev_rs = s.replica_states.get(prev_leader) if prev_leader is not None else None
    leader_rs = s.replica_states.get(leader)
    # A latest sample lower than the one before (it restarted and truncated -- or the
    # sample is wrong) stays a suspect: its next sample, as leader, confirms the truncation
    # or contradicts it, and the election waits for that or the epoch record. One sample
    # never pages (it used to be believed here, as leadership rests on it).
    s.append_lineage(EpochEntry(epoch, -1, leader, t), config)
    s.election_times = (*s.election_times, t)[-4 * config.flapping_elections :]
    details = {
        "epoch_before": prev_epoch,
        "epoch": epoch,
        "epochs_skipped": max(0, epoch - prev_epoch - 1),
        "leader_before": prev_leader,
        "leader": leader,
        "isr_before": list(before.isr),
        "eligible_leader_replicas_before": list(before.elr),
        "clean": clean,
        "membership": membership,
        "start_offset": epoch_record if epoch_record is not None else -1,
        "committed_hw_before": s.max_hw,
    }
    if s.pending_hw > s.max_hw:
        # A higher HW read once and never confirmed (no leader sample or second read
        # reached it before the leader went): not the reference, but on-call should know
        # the loss may reach that far.
        details["unconfirmed_hw"] = s.pending_hw
    # Its log beyond an earlier epoch's start that it never truncated to is another epoch's
    # suffix: valid only below it -- if it was elected from outside the ISR. Membership that
    # leaves a clean election open (it rejoined and was elected between two reads, or a
    # reassignment handed over to it) leaves the mark unproven: to lead from the ISR it
    # fetched from the last leader, truncating first (KIP-101), and a loss found from the
    # mark alone cannot in turn prove the election unclean. Where the topic lets the
    # controller elect outside the ISR, that loss stays possible: said, not paged (_decide).
    valid_below = leader_rs.must_truncate_to if leader_rs is not None else -1
    if valid_below >= 0 and clean and config.epoch_truncation:
        if unclean_allowed:
            details["unproven_suffix_from"] = valid_below
        valid_below = -1
    emit.event(K.LEADER_ELECTION, t, details, broker=leader)
    # An earlier election still undecided is folded into this one: its committed HW is
    # still the one this election is judged against (nothing was rebased).
    emit.condition(K.ELECTION_PENDING, False, t)
    if not clean:
        emit.event(K.UNCLEAN_ELECTION, t, {**details, "witness": "membership"}, broker=leader)
    s.election = ElectionCheck(
        epoch=epoch,
        leader=leader,
        at=t,
        committed=s.max_hw,
        committed_at=s.max_hw_at,
        clean=clean,
        leader_before_leo=prev_rs.leo if prev_rs is not None else -1,
        valid_below=valid_below,
        leo_before=(
            _latest(leader_rs)
            if leader_rs is not None and 0 <= leader_rs.observed_at < before.meta_at
            else -1
        ),
        details=details,
        meta_before=before.meta_at,
    )
    if leader_rs is not None:
        _note_pre(s.election, leader_rs)
    # Replicas holding more than the new leader's start must truncate to it (KIP-101): a
    # best guess of the start until the epoch record replaces it (the latest sample).
    start = epoch_record
    if start is None and leader_rs is not None and leader_rs.leo >= 0:
        start = _latest(leader_rs)
    _must_truncate_to(s, leader, start)
    believed = epoch_record is not None and on_epoch_record(
        s, epoch_record, t, emit, leader_back_at, ev.high_watermark
    )
    if not believed:
        maybe_decide(s, t, config, emit)


def on_epoch_record(
    s: PartitionState,
    start: int,
    t: int,
    emit: Emitter,
    leader_back_at: int = -1,
    hw: int | None = None,
) -> bool:
    """The current epoch's start, from its leader: exact. Decides a pending election; after a
    verdict on a sample, reports the offsets that sample missed.

    Unless the record is one sample against the rest: after a clean election, a start below
    the committed HW while the new leader was sampled holding all of it, and no restart of
    its broker witnessed since that HW (``leader_back_at``) -- a log that held the committed
    offsets loses them only by truncating, which takes a restart. Then the record is not
    believed (``telemetry_inconsistent``) and the election is left to the samples: False.
    ``hw``: the HW read with the record, the new leader's (at most its log end)."""
    c = s.election
    if c is not None and _record_contradicted(s, c, start, leader_back_at, hw):
        emit.event(
            K.TELEMETRY_INCONSISTENT,
            t,
            {
                "source": "partition",
                "field": "epoch_start_offset",
                "value": start,
                "committed_hw": c.committed,
                "leader": c.leader,
                "high_watermark": hw,
                "epoch": c.epoch,
            },
        )
        return False
    _set_lineage_start(s, s.leader_epoch, start)
    if c is None or c.epoch != s.leader_epoch:
        return True
    # The exact start replaces the guess for the replicas still due to truncate to it.
    for b, other in s.replica_states.items():
        if b != c.leader and other.must_truncate_to >= 0:
            other.must_truncate_to = start if other.leo > start else -1
    rs = s.replica_states.get(c.leader)
    if rs is not None and 0 <= start < c.leo_before:
        # Its last sample from before the election held more than the epoch began with: it
        # truncated in between (a restart). Say what that removed of what was committed
        # *then* -- the HW the election is judged against, not one its own epoch reached
        # since. (A sample is stamped with its round's start and may have been read after
        # the election, while the new leader appended: found by the property test, a clean
        # failover during a slow scrape paged a truncation below the epoch's own HW.)
        current = rs.leo
        rs.leo = c.leo_before
        truncate(s, c.leader, rs, start, t, emit, committed=c.committed)
        rs.leo = current
        if rs.observed_at <= c.at:  # no sample since: the record is its log end
            rs.leo, rs.suspect_leo = start, -1
    if not c.on_sample:
        _decide(s, c, start, "epoch", t, emit)
        return True
    if c.used >= 0:
        # Judged on a sample; the record says where the log really ended.
        valid = _valid(c, start)
        top = min(_valid(c, c.used), c.committed)
        if valid < top:
            _report_loss(s, c, valid, top, start, "epoch", t, emit, correction_of=c.used)
        if s.max_hw <= c.used:
            # Rebased on what the new leader holds -- committed only up to the old HW.
            s.max_hw, s.max_hw_at = min(valid, c.committed), t
    s.election = None
    return True


def _record_contradicted(
    s: PartitionState, c: ElectionCheck, start: int, leader_back_at: int, hw: int | None
) -> bool:
    """Whether an epoch record saying a clean election lost committed offsets is one sample
    against the rest. The new leader is known to hold all that was committed -- the HW read
    with the record (the leader's own, at most its log end), or its log end sampled at or
    before the election with no restart of its broker seen after that sample -- and more
    above the record's start than its log grows between two samples (x4): it cannot have
    appended that much since it took over, nor lost it without a restart."""
    if not (c.epoch == s.leader_epoch and c.clean and 0 <= start < c.committed):
        return False
    growth = rules.GROWTH_SLACK * s.leader_max_step()
    if hw is not None and hw >= c.committed and hw - start > growth:
        return True
    rs = s.replica_states.get(c.leader)
    if rs is not None and 0 <= rs.leo_at <= c.at:
        sampled, restarted = rs.leo, leader_back_at > rs.leo_at
    else:
        sampled, restarted = c.leo_before, leader_back_at >= c.committed_at
    return sampled >= c.committed and not restarted and sampled - start > growth


def maybe_decide(s: PartitionState, t: int, config: ModelConfig, emit: Emitter) -> None:
    """Decide a pending election if its evidence has arrived or its waits are over.

    Without the epoch record, samples of the new leader stamped at or after the committed HW:

    - taken before the election (``pre``): at or above ``C``, nothing was lost; below it
      after a drop (its log end went back: a truncation), the loss is judged on it; below it
      while it was merely behind, it may have fetched more before the election -- the exact
      record is awaited, and after an unclean election the loss is judged on the sample
      once ``epoch_record_wait_ms`` is over (after a clean one such a sample proves only
      that the stamps were not comparable: no verdict on it);
    - taken after (``post``): an upper bound of its log end at the election (it appends as
      leader), so a loss below it is certain (at least that many offsets); at or above
      ``C`` it proves nothing for an unclean election, and nothing lost for a clean one.
    """
    c = s.election
    if c is None:
        return
    rs = s.replica_states.get(c.leader)
    if c.on_sample:
        _refine(s, c, rs, t, emit)
        return
    if c.committed <= 0:
        _decide(s, c, -1, "nothing committed", t, emit)
        return
    post = -1
    if rs is not None and rs.observed_at >= 0:
        if rs.observed_at < c.at:
            _note_pre(c, rs)  # a sample from before the election, arriving late
        elif rs.observed_at > c.pre_at:
            post = _latest(rs)
    waited, committed = t - c.at, c.committed
    pre, pre_ok, post_ok = c.pre, _valid(c, c.pre) >= committed, _valid(c, post) >= committed
    if pre >= 0 and c.pre_drop:
        _decide(s, c, pre, "sample", t, emit)  # a drop (a truncation) is believed
    elif pre >= 0 and pre_ok and (c.clean or c.pre_certain):
        _decide(s, c, pre, "sample", t, emit)  # it held everything committed
    elif post >= 0 and (not post_ok or c.clean):
        # As leader it only appends: below C, a loss at least this large; at or above C
        # after a clean election, nothing lost (an ISR member holds what is committed).
        c.post_seen = True
        _decide(s, c, post, "sample", t, emit)
    elif pre >= 0 and not pre_ok and not c.clean and waited >= config.epoch_record_wait_ms:
        # Unclean: a replica outside the ISR may well hold less than was committed; the
        # exact record is overdue, so the loss is judged on the sample (an upper bound).
        # A clean leader's sample below C is no evidence: an ISR member holds at least
        # every HW the leader reported before the sample -- unless the stamps are not
        # comparable (same round, two collectors' clocks), which is what it shows.
        _decide(s, c, pre, "sample", t, emit)
    elif waited >= config.election_evidence_wait_ms:
        # No evidence, or none that settles it (at or above C, sampled too close to an
        # unclean election to rule out what it appended since): the loss is unknown.
        _decide(s, c, -1, "unknown", t, emit)
    else:
        emit.condition(
            K.ELECTION_PENDING,
            True,
            t,
            lambda: {
                "epoch": c.epoch,
                "leader": c.leader,
                "committed_hw_before": c.committed,
                "leader_leo_sampled_before": c.pre,
                "waiting_for": "the new leader's epoch record or a LEO sample",
                "since": c.at,
            },
        )


def _refine(
    s: PartitionState, c: ElectionCheck, rs: ReplicaState | None, t: int, emit: Emitter
) -> None:
    """After a verdict on a sample taken before the election: the leader's log end lower
    since (a leader's log only grows) means that sample was stale -- it had truncated before
    it led. Its first sample under the new epoch is believed alone (leadership rests on it,
    as at the election); later ones once confirmed. What they add to the loss is reported
    as a correction."""
    if rs is None or rs.observed_at < c.at:
        return
    first, c.post_seen = not c.post_seen, True
    if first:
        leo = _latest(rs)
    elif rs.suspect_leo < 0:
        leo = rs.leo
    else:
        return
    if not 0 <= leo < c.used:
        return
    if rs.suspect_leo >= 0:
        truncate(s, c.leader, rs, leo, t, emit)  # believed now: say what it removed
        rs.leo, rs.suspect_leo = leo, -1
    valid, top = _valid(c, leo), min(_valid(c, c.used), c.committed)
    if valid < top:
        _report_loss(s, c, valid, top, leo, "sample", t, emit, correction_of=c.used)
        if s.max_hw <= c.used:
            # Rebased on what the new leader holds -- committed only up to the old HW.
            s.max_hw, s.max_hw_at = min(valid, c.committed), t
    c.used = leo


def _decide(
    s: PartitionState,
    c: ElectionCheck,
    leo: int,
    basis: str,
    t: int,
    emit: Emitter,
) -> None:
    """The verdict: ``leo`` is the new leader's log end per ``basis`` (-1: unknown)."""
    if basis == "unknown":
        emit.event(
            K.ELECTION_UNVERIFIED,
            t,
            {
                **c.details,
                "committed_hw_before": c.committed,
                "waited_ms": t - c.at,
                "leader_leo_sampled_before": c.pre,
                "lost_at_most": max(0, c.committed - c.pre) if c.pre >= 0 else None,
                "why": "the new leader's epoch record did not arrive, and its LEO samples do "
                "not settle what it held when elected",
            },
            broker=c.leader,
        )
        s.election = None
    else:
        valid = _valid(c, leo) if leo >= 0 else -1
        lost = rules.committed_offsets_lost(c.committed, valid)
        if lost is not None:
            _report_loss(s, c, lost[0], lost[1], leo, basis, t, emit)
            s.max_hw, s.max_hw_at = valid, t  # rebased on what the new leader holds
        elif 0 <= (suffix := c.details.get("unproven_suffix_from", -1)) < c.committed:
            # Nothing lost if it was elected from the ISR; the committed offsets above where
            # its unproven suffix began, if from outside (start_election).
            emit.event(
                K.ELECTION_UNVERIFIED,
                t,
                {
                    **c.details,
                    "committed_hw_before": c.committed,
                    "waited_ms": t - c.at,
                    "leader_leo_sampled_before": c.pre,
                    "lost_at_most": c.committed - suffix,
                    "why": f"not seen rejoining the ISR, it held another epoch's records "
                    f"above {suffix} when last sampled: nothing is lost if it rejoined "
                    "before its election, the committed offsets above it if it was elected "
                    "from outside the ISR",
                },
                broker=c.leader,
            )
        c.on_sample, c.used = basis == "sample", leo
        # After a verdict on a sample, a later epoch record may still refine it.
        s.election = c if c.on_sample else None
    emit.condition(K.ELECTION_PENDING, False, t)


def _report_loss(
    s: PartitionState,
    c: ElectionCheck,
    lost_from: int,
    lost_to: int,
    leo: int,
    basis: str,
    t: int,
    emit: Emitter,
    correction_of: int = -1,
) -> None:
    """``committed_data_loss`` of the offsets ``[lost_from, lost_to)``; at an election that
    membership left clean (or ambiguous) and that no truncation of the new leader's
    explains, an ``unclean_election`` too (``witness: loss``): a clean election loses no
    committed data. Also when the loss comes as a correction of a verdict on a sample."""
    unclean_by_loss = c.clean and not _explained_by_truncation(s, c)
    if unclean_by_loss:
        c.clean = False  # the loss says how the election went: not clean
    # What the old leader held at its last sample (acks=1 writes included) and the new
    # leader does not: committed loss <= this <= acknowledged loss, up to what the old
    # leader acknowledged after that sample.
    details: dict[str, Any] = {
        "committed_hw_before": c.committed,
        "new_leader": c.leader,
        "new_leader_leo": leo,
        "lost_from": lost_from,
        "lost_to": lost_to,
        "lost_count": lost_to - lost_from,
        "epoch": c.epoch,
        "clean_election": c.clean,
        "leader_before_leo": c.leader_before_leo,
        "old_leader_offsets_lost": max(c.leader_before_leo, lost_to) - lost_from,
        # "epoch": the new leader's own record of where its epoch began (exact); "sample":
        # its LEO as sampled at or after the committed HW (exact when it had stopped
        # fetching, a lower bound of the loss once it leads and appends).
        "leo_sampled": basis,
    }
    if "unconfirmed_hw" in c.details:
        # A higher HW read once: were it real, the loss reached up to it.
        details["unconfirmed_hw"] = c.details["unconfirmed_hw"]
    if lost_from < leo:
        details["diverged_from"] = lost_from  # its records above this are another epoch's
    if correction_of >= 0:
        # Added to the loss already reported from the sample: together they are the loss
        # the epoch record says.
        details["correction_of_sampled_leo"] = correction_of
    emit.event(K.COMMITTED_DATA_LOSS, t, details)
    if unclean_by_loss:
        emit.event(
            K.UNCLEAN_ELECTION,
            t,
            {**c.details, "clean": False, "witness": "loss", "lost_count": lost_to - lost_from},
            broker=c.leader,
        )


def _note_pre(c: ElectionCheck, rs: ReplicaState) -> None:
    """The new leader's latest sample from before the election, if it is evidence (not
    older than the committed HW it would be compared with)."""
    if rs.observed_at >= max(0, c.committed_at) and rs.observed_at >= c.pre_at:
        c.pre, c.pre_at = _latest(rs), rs.observed_at
        # A drop confirmed by a second sample (a truncation judged): a lone low sample is
        # no evidence of one.
        c.pre_drop = rs.suspect_leo < 0 and 0 <= rs.last_truncation[2] == rs.leo
        c.pre_certain = rs.observed_at < c.meta_before


def _valid(c: ElectionCheck, leo: int) -> int:
    return min(leo, c.valid_below) if c.valid_below >= 0 else leo


def _must_truncate_to(s: PartitionState, leader: int, start: int | None) -> None:
    """Mark the replicas holding more than the new epoch's ``start`` (None: unknown)."""
    for b, rs in s.replica_states.items():
        rs.must_truncate_to = start if start is not None and b != leader and rs.leo > start else -1


def _latest(rs: ReplicaState) -> int:
    """The replica's latest sampled LEO (a lower, unconfirmed one included)."""
    return rs.suspect_leo if rs.suspect_leo >= 0 else rs.leo


def _explained_by_truncation(s: PartitionState, c: ElectionCheck) -> bool:
    rs = s.replica_states.get(c.leader)
    return rs is not None and 0 <= rs.last_truncation[2] < c.committed


def _set_lineage_start(s: PartitionState, epoch: int, start: int) -> None:
    for i in range(len(s.lineage) - 1, -1, -1):
        e = s.lineage[i]
        if e.epoch == epoch:
            if start >= 0 and e.start_offset != start:
                s.lineage[i] = e._replace(start_offset=start)
            return


# --- truncation ----------------------------------------------------------------------------


def truncate(
    s: PartitionState,
    broker: int,
    rs: ReplicaState,
    leo: int,
    t: int,
    emit: Emitter,
    epoch: int | None = None,
    follower: bool = False,
    committed: int | None = None,
) -> None:
    """``broker``'s log end went down to ``leo``: report it if committed offsets went.

    ``epoch``: the leadership it happened under when not the current one (a truncation
    first believed at the election that followed it). ``follower``: a replica that does
    not lead -- a warning, not a page: the leader still holds what it removed (a disk
    replaced, a log rebuilt from the leader), and were it elected holding less than was
    committed, the election's ``committed_data_loss`` pages. A leader's, or a new leader's
    at its election, is critical. ``committed``: the committed HW it is judged against
    (default: the highest seen)."""
    epoch = s.leader_epoch if epoch is None else epoch
    committed = s.max_hw if committed is None else committed
    # Truncating down to the new epoch's start is the leader-epoch protocol at work: what it
    # removes is the old epoch's divergent suffix (already counted when it was lost).
    floor = committed if rs.must_truncate_to < 0 else min(committed, rs.must_truncate_to)
    seen = (epoch, rs.leo, leo)
    if committed >= 0 and leo < floor and rs.last_truncation != seen:
        rs.last_truncation = seen
        emit.event(
            K.TRUNCATION_BELOW_HW,
            t,
            {
                "leo_before": rs.leo,
                "leo": leo,
                "committed_hw": committed,
                "committed_offsets_removed": min(rs.leo, committed) - leo,
                "leader": s.leader,
                "epoch": epoch,
            },
            broker=broker,
            severity=Severity.WARNING if follower else None,
        )
