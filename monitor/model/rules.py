"""The rules, one small pure function each, named for what it detects.

They take plain values (no state objects) so each can be read, and tested, on its own.
The transition in :mod:`monitor.model.partition` decides *when* to ask them.
"""

from __future__ import annotations

from collections.abc import Sequence

from monitor.model.state import TopicConfig

#: How many of a log's (or an HW's) largest rises between two reads a new value may be past
#: the last one and still be believed at once: a read taken later than its stamp says, a
#: burst of produce. Beyond it, one read is held until confirmed (issue 50).
GROWTH_SLACK = 4


def is_offline(leader: int | None) -> bool:
    """No leader: nobody can read or write the partition."""
    return leader is None


def original_replicas(replicas: Sequence[int], adding: Sequence[int]) -> tuple[int, ...]:
    """The replicas a running reassignment started from: the assignment without the ones
    it is adding. KIP-455: while a move runs Kafka lists old and new replicas together, and
    counts the replication factor -- and under-replication -- against the original ones.

    >>> original_replicas((1, 3, 2), adding=(3,))
    (1, 2)
    """
    return tuple(b for b in replicas if b not in adding)


def is_under_replicated(isr: Sequence[int], replicas: Sequence[int]) -> bool:
    return len(isr) < len(replicas)


def is_under_min_isr(isr: Sequence[int], min_isr: int, replicas: Sequence[int] = ()) -> bool:
    """acks=all produces fail with NotEnoughReplicas: read-only for durable writers.

    A min ISR above the replica count can never be met -- acks=all writes fail whatever the
    ISR: a configuration problem (``durability_risk``, ``min_isr_not_below_rf``), not a
    degradation, so not judged here (nor can one wrong config sample page).

    >>> is_under_min_isr([1], 2, [1, 2, 3]), is_under_min_isr([1, 2, 3], 1000, [1, 2, 3])
    (True, False)
    """
    return len(isr) < min_isr and (not replicas or min_isr <= len(replicas))


def is_at_min_isr(isr: Sequence[int], replicas: Sequence[int], min_isr: int) -> bool:
    """Degraded to exactly min ISR: one more failure stops acks=all writes.

    Kafka's AtMinIsr also counts healthy partitions of topics with min ISR = RF; those are
    a configuration problem (``durability_risk``), not a degradation, so they are left out.
    """
    return len(isr) == min_isr and len(isr) < len(replicas)


def election_membership(
    new_leader: int | None,
    prev_isr: Sequence[int],
    prev_elr: Sequence[int],
    new_isr: Sequence[int],
    prev_adding: Sequence[int],
    prev_replicas: Sequence[int] = (),
    unclean_allowed: bool = True,
) -> str:
    """What membership says of an election: ``in_last_isr`` (clean),
    ``eligible_leader_replica`` (clean: from the ELR of KIP-966 -- a replica that left the
    ISR while the ISR was at min ISR, so it held the committed HW then and, not having been
    unclean since, still holds every committed offset; what it lacks is only what was
    never committed), ``outside_last_isr`` (unclean), or -- for a new leader outside the
    last ISR and ELR -- one of three cases membership cannot decide, left to the new
    leader's log (a loss makes them unclean):

    - ``reassigned_to``: it was a replica a running reassignment was adding, or not a
      replica at all when last seen (a move that began and ended between two reads: a small
      partition's takes seconds). KRaft ends a move by adding the caught-up replica to the
      ISR and, when the old leader is being removed, making it leader in the same change (a
      full move, RF 1 included, leaves none of the last ISR in the new one); no election
      of Kafka's own, clean or not, picks a broker outside the replica set;
    - ``rejoined_with_last_isr``: the new ISR holds a member of the last one too, so it may
      have joined the ISR and been elected cleanly between two samples (a preferred election
      right after a rejoin) or been elected uncleanly with the old leader back since
      (Kafka's unclean path makes the leader the whole ISR);
    - ``outside_last_isr_unclean_disabled``: neither, on a topic whose
      ``unclean.leader.election.enable`` is false (``unclean_allowed``). Kafka's controller
      then elects only from the ISR or the ELR, so the reads missed how it got there: it
      rejoined the ISR and was elected between two reads (RF 2's rolling restart: the
      follower back, then the leader restarted), or the read that shrank the ISR carried
      no ELR (a Metadata API fallback). Only an operator's forced election
      (``kafka-leader-election --election-type unclean``) elects outside both, and the
      controller's counter says so (``unclean_election`` with ``witness:
      controller_counter``).

    >>> election_membership(3, prev_isr=(), prev_elr=(3,), new_isr=(3,), prev_adding=())
    'eligible_leader_replica'
    >>> election_membership(3, prev_isr=(2, 1), prev_elr=(), new_isr=(1, 3), prev_adding=())
    'rejoined_with_last_isr'
    >>> election_membership(3, prev_isr=(2,), prev_elr=(), new_isr=(3,), prev_adding=(3,))
    'reassigned_to'
    >>> election_membership(3, prev_isr=(2,), prev_elr=(), new_isr=(3,), prev_adding=(),
    ...                     prev_replicas=(2,))
    'reassigned_to'
    >>> election_membership(2, prev_isr=(1,), prev_elr=(), new_isr=(2,), prev_adding=(),
    ...                     prev_replicas=(1, 2))
    'outside_last_isr'
    >>> election_membership(2, prev_isr=(1,), prev_elr=(), new_isr=(2,), prev_adding=(),
    ...                     prev_replicas=(1, 2), unclean_allowed=False)
    'outside_last_isr_unclean_disabled'
    """
    if new_leader is not None and new_leader not in prev_isr and new_leader in prev_elr:
        return "eligible_leader_replica"
    if new_leader is None or not is_unclean_election(new_leader, prev_isr, prev_elr):
        return "in_last_isr"
    if new_leader in prev_adding or (prev_replicas and new_leader not in prev_replicas):
        return "reassigned_to"
    if any(b in new_isr for b in (*prev_isr, *prev_elr) if b != new_leader):
        return "rejoined_with_last_isr"
    return "outside_last_isr" if unclean_allowed else "outside_last_isr_unclean_disabled"


def is_unclean_election(
    new_leader: int | None, prev_isr: Sequence[int], prev_elr: Sequence[int]
) -> bool:
    """The new leader was in neither the last ISR nor the eligible leader replicas.

    Electing from the ELR (KIP-966) is clean: those replicas held the committed HW when
    they left the ISR. An *empty* previous ISR is real evidence: with ELR (on by default
    since Kafka 4.1) an offline partition keeps ``ISR = []`` and its last leader in the
    ELR, so any other replica that leads next was elected uncleanly. (The caller asks only
    about partitions it has seen before; first sight is not an election.)

    Telemetry is sampled: a replica outside the ISR seen last may have rejoined and been
    elected between two samples (a preferred election right after a restart) -- clean -- or
    the old leader may have rejoined after an unclean election of another replica. The two
    look alike in the metadata; the loss tells them apart (``monitor.model.election``: a
    loss at an election that membership calls clean makes it unclean).

    >>> is_unclean_election(2, prev_isr=(), prev_elr=(1,))
    True
    >>> is_unclean_election(1, prev_isr=(), prev_elr=(1,))
    False
    >>> is_unclean_election(2, prev_isr=(1,), prev_elr=())
    True
    """
    if new_leader is None:
        return False
    return new_leader not in prev_isr and new_leader not in prev_elr


def committed_offsets_lost(committed_hw: int, new_leader_leo: int) -> tuple[int, int] | None:
    """The committed range ``[from, to)`` a new leader does not hold, or None.

    Offsets below the HW were committed; a leader whose log ends below that HW has lost
    ``[new_leader_leo, committed_hw)`` for every consumer from now on.
    """
    if committed_hw < 0 or new_leader_leo < 0 or new_leader_leo >= committed_hw:
        return None
    return (new_leader_leo, committed_hw)


def time_behind(samples: Sequence[int], offset: int, at: int, rising: bool = False) -> int | None:
    """When the leader's log first passed ``offset`` (by ``at``), from its LEO samples.

    ``samples`` holds the leader's samples oldest first, flat: ``[t0, leo0, t1, leo1, ...]``
    (:attr:`~monitor.model.state.PartitionState.leader_leos`). Returns the time
    of the first sample taken at or before ``at`` whose LEO exceeded ``offset`` — the moment
    the holder of ``offset`` stopped being caught up — or None if no such sample exists (it
    holds everything the leader was seen to have). This is the conservative reading: the
    real moment lies between that sample and the one before it, so lag is never overstated.

    ``rising``: the caller knows that neither the times nor the LEOs ever go down
    (:attr:`~monitor.model.state.PartitionState.leader_leos_rising`). Then the samples past
    ``offset`` are the newest ones, and the first of them is found from the end: one or two
    steps for a follower that keeps up, where the scan from the oldest walks the whole
    history (the same answer: ``tests/model/test_rules.py``).

    >>> time_behind([0, 10, 5, 20, 10, 30], 20, at=10)
    10
    >>> time_behind([0, 10, 5, 20, 10, 30], 20, at=10, rising=True)
    10
    >>> time_behind([0, 10, 5, 20, 10, 30], 30, at=10) is None
    True
    """
    if rising:
        i = len(samples) - 1
        while i > 0 and samples[i] > offset:
            i -= 2
        # samples[i + 1] is the first sample past offset (none if i is the last LEO)
        if i + 2 >= len(samples):
            return None
        t = samples[i + 1]
        return t if t <= at else None
    for i in range(0, len(samples), 2):
        t = samples[i]
        if t > at:
            return None
        if samples[i + 1] > offset:
            return t
    return None


def is_lagging(lag_ms: int, lag_offsets: int, max_ms: int, max_offsets: int | None) -> bool:
    """Behind for longer than Kafka itself tolerates (or by more offsets than configured)."""
    if lag_ms > max_ms:
        return True
    return max_offsets is not None and lag_offsets > max_offsets


def is_flapping(election_times: Sequence[int], now: int, window_ms: int, threshold: int) -> bool:
    return sum(1 for t in election_times if now - t <= window_ms) >= threshold


def durability_risks(config: TopicConfig) -> list[str]:
    """The misconfigurations of a topic's durability settings, as short reason codes.

    >>> durability_risks(TopicConfig(3, 1, False))
    ['min_isr_1_with_rf_3']
    """
    rf, min_isr = config.replication_factor, config.min_insync_replicas
    reasons: list[str] = []
    if rf == 1:
        reasons.append("rf_1")
    if min_isr <= 1 and rf >= 3:
        reasons.append(f"min_isr_1_with_rf_{rf}")
    if rf > 1 and min_isr >= rf:
        reasons.append("min_isr_not_below_rf")
    if config.unclean_leader_election_enable:
        reasons.append("unclean_election_enabled")
    return reasons


def durability_profile(config: TopicConfig) -> str:
    """``CP``, ``AP`` or ``misconfigured`` (seed 004's profiles).

    CP: min ISR is a majority of RF and unclean elections are off — after an acks=all ack a
    message survives any failure that leaves a quorum. AP: min ISR 1 with RF 2 — writes stay
    up, an acked message not yet replicated dies with its leader.
    """
    if durability_risks(config):
        return "misconfigured"
    if config.min_insync_replicas >= config.replication_factor // 2 + 1:
        return "CP"
    return "AP"
