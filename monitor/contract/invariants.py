"""What Kafka guarantees of one partition record, checked before the model sees it.

The field rules of :mod:`monitor.contract.events` (types, bounds, lengths) say what a value
may be; these say what values may be *together*, as Kafka's controller and log guarantee
them -- so a record that breaks one is a collector's or an exporter's bug, never a state
of the cluster, and is rejected with a reason naming the field and the value (the job's
dead letter, replay's line error) instead of being judged:

* no broker twice in ``replicas``, ``isr`` or ``eligible_leader_replicas`` (Kafka keeps
  each as a set of broker ids: an ISR ``[1, 1]`` would count one replica twice toward
  ``min.insync.replicas``);
* ``isr`` within ``replicas`` (during a reassignment ``replicas`` holds both sets, and its
  completion takes the removed replicas out of the ISR);
* a ``leader`` among the ``replicas``, or none (offline).

Not here either: the ELR within the replicas. The controller's ELR tracking
(``PartitionChangeBuilder.maybePopulateTargetElr``) unions the old ISR into it without
filtering by the new replica set, so a reassignment that completes with the ISR under
``min.insync.replicas`` (an RF lowered below it) can leave a removed replica in the ELR.
Refusing that would blind a real partition, round after round.

Not here: the leader's ``high_watermark`` against its log end in the same round record.
Kafka keeps HW <= LEO at every instant, but the collector reads the two at different
instants -- the exporter pages (log ends) at the round's start, concurrently, and the HWs
(ListOffsets) with the metadata -- and its stamps say only that each was read after them,
never which came first: under load an HW read after the leader's page passes the log end
that page showed, legitimately. A rule on one record would refuse good rounds; an HW above
every log end across rounds is the model's judgement.

What Kafka allows but is unsafe -- ``min.insync.replicas`` above the replication factor,
an ISR of one -- is not refused here: it is a durability finding.

Pure: the contract's pydantic models (:class:`~monitor.contract.events.PartitionEvent`)
and the Spark job's fast reader (:mod:`streaming.records`) call the same function, so the
two paths give one verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def partition_problem(
    leader: int | None,
    replicas: Sequence[int],
    isr: Sequence[int],
    eligible_leader_replicas: Sequence[int] | None,
) -> str | None:
    """The first invariant a partition record breaks, named by field and value; else None.

    >>> partition_problem(1, [1, 2, 3], [1, 2], None) is None
    True
    >>> partition_problem(1, [1, 2, 3], [1, 1], None)
    'isr: broker 1 is listed twice ([1, 1])'
    >>> partition_problem(1, [1, 2, 3], [1, 9], None)
    'isr: broker 9 is not one of the replicas [1, 2, 3]'
    >>> partition_problem(None, [1, 2, 3], [], [2, 2])
    'eligible_leader_replicas: broker 2 is listed twice ([2, 2])'
    >>> partition_problem(4, [1, 2, 3], [1], None)
    'leader: broker 4 is not one of the replicas [1, 2, 3]'
    >>> partition_problem(1, [1, 1, 1], [1], None)
    'replicas: broker 1 is listed twice ([1, 1, 1])'
    >>> partition_problem(None, [1, 2], [], [3]) is None  # an ELR member removed: possible
    True
    """
    members = set(replicas)
    # The common case in cheap checks first (the job reads millions of records).
    if not (
        len(members) == len(replicas)
        and len(set(isr)) == len(isr)
        and members.issuperset(isr)
        and (leader is None or leader in members)
        and (
            not eligible_leader_replicas
            or len(set(eligible_leader_replicas)) == len(eligible_leader_replicas)
        )
    ):
        return _membership_problem(leader, replicas, isr, eligible_leader_replicas or ())
    return None


def _membership_problem(
    leader: int | None, replicas: Sequence[int], isr: Sequence[int], elr: Sequence[int]
) -> str:
    members = set(replicas)
    for name, brokers in (("replicas", replicas), ("isr", isr), ("eligible_leader_replicas", elr)):
        twice = _first_repeated(brokers)
        if twice is not None:
            return f"{name}: broker {twice} is listed twice ({_shown(brokers)})"
    outside = next((b for b in isr if b not in members), None)
    if outside is not None:
        return f"isr: broker {outside} is not one of the replicas {_shown(replicas)}"
    assert leader is not None
    return f"leader: broker {leader} is not one of the replicas {_shown(replicas)}"


def _first_repeated(brokers: Iterable[int]) -> int | None:
    seen: set[int] = set()
    for b in brokers:
        if b in seen:
            return b
        seen.add(b)
    return None


def _shown(brokers: Sequence[int]) -> str:
    """A broker list as a reason shows it: whole up to 8 ids, else its head and length."""
    if len(brokers) <= 8:
        return str(list(brokers))
    return f"{list(brokers[:8])}... ({len(brokers)} brokers)"
