"""The demo's verdict on the monitor's loss report, against the consumer's read-back."""

from __future__ import annotations

from collections.abc import Iterable

from monitor.dev.lab.load import AckEntry
from monitor.model import Finding


def held_ranges(loss: list[Finding]) -> list[tuple[int, int]]:
    """The offsets the loss findings say the old leader held and the new one does not,
    merged (a correction of a loss covers its range again): each ``[lost_from, lost_from +
    old_leader_offsets_lost)``. The finding counts from ``lost_from`` (below the new
    leader's log end where the logs diverged) up to the old leader's last seen end -- its
    LEO sample or the committed HW it was last seen with, whichever is higher (the HW can be
    the newer sample). CI failed twice on the LEO sample alone as the top: the 18 and then 4
    lost offsets between it and the HW were taken for writes acknowledged after the
    monitor's last sample.

    >>> from monitor.model import FindingKind as K, FindingState as S, Severity as V
    >>> def f(lost_from, held):
    ...     d = {"lost_from": lost_from, "old_leader_offsets_lost": held}
    ...     return Finding(K.COMMITTED_DATA_LOSS, S.EVENT, V.CRITICAL, "c", "t", 0, 1, 1, None, d)
    >>> held_ranges([f(10348, 630), f(10400, 100), f(11000, 5)])
    [(10348, 10978), (11000, 11005)]
    """
    spans = sorted(
        (int(d["lost_from"]), int(d["lost_from"]) + int(d["old_leader_offsets_lost"]))
        for d in (f.details for f in loss)
    )
    merged: list[tuple[int, int]] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def by_acknowledger(lost: Iterable[AckEntry], killed_at: float) -> tuple[list[int], list[int]]:
    """The lost records' offsets, sorted, split at the old leader's kill: those it
    acknowledged (the verdict's), and those a later leader did -- acknowledged with acks=1
    above the HW and gone when leadership moved again before a follower had them: never
    committed, not the monitor's to report. An offset can be in both: the old leader's
    record was lost at the unclean election, the new leader's at that offset at the
    failback (CI: offsets 7828-7829, the failback's new epoch starting at 7828 a moment
    after the new leader had answered them).

    >>> def e(offset, at):
    ...     return AckEntry("orders", 0, offset, "r", offset, at)
    >>> by_acknowledger([e(7828, 5.0), e(7828, 9.0), e(7829, 9.1), e(7000, 1.0)], killed_at=6.0)
    ([7000, 7828], [7828, 7829])
    """
    old: list[int] = []
    later: list[int] = []
    for entry in lost:
        (old if entry.at < killed_at else later).append(entry.offset)
    return sorted(old), sorted(later)


def in_flight_bound(held: int) -> int:
    """How many appends of the held ranges may have died unanswered with the old leader: its
    answers in flight at the crash (the demo's producer: 100 records/s, linger 5 ms, 5
    requests in flight a connection). A bound, so that offsets the old leader never held
    cannot pass as unanswered ones: max(5, 1 %)."""
    return max(5, held // 100)


def loss_verdict(
    loss: list[Finding],
    committed: int,
    held: int,
    seen: int,
    after: int,
    consumer_lost: int,
    unacked: int = 0,
) -> tuple[str, bool]:
    """The demo's verdict on the monitor's loss report against the consumer's read-back.

    ``consistent``: every offset of the held ranges (:func:`held_ranges`; ``held`` of them)
    is either missed by the consumer (``seen``: acknowledged to the demo's producer, the
    topic's only writer, before the old leader was killed, and gone) or was never
    acknowledged before the kill (``unacked``: appended by the old leader while its answer
    was in flight when it died -- counted from the ack log's times, at most
    :func:`in_flight_bound` of them); and the rest of what the consumer misses lies above the
    ranges (acknowledged after the monitor's last sample of the old leader). An offset of
    the ranges acknowledged before the kill that the consumer still reads is an
    over-report; so are more unacknowledged offsets than a producer has in flight.

    ``UNDER-REPORTED`` passes only when the findings themselves say their evidence was
    incomplete -- no loss of the election was judged on the new leader's epoch record
    (``leo_sampled`` is never ``epoch``), so the count rests on a LEO sample that a restart
    truncation can undercut -- and by no more than 2 % of the reported count. Anything else
    (an over-report, an under-report the findings call exact) fails.

    >>> loss_verdict([], 0, 0, 0, 0, 5)[1]
    False
    >>> loss_verdict([], 400, 500, 497, 40, 537, unacked=3)[1]
    True
    """
    accounted = seen + unacked == held and unacked <= in_flight_bound(held)
    exact = 0 < committed <= held and accounted and seen + after == consumer_lost
    below = consumer_lost - seen - after
    if exact:
        return (
            "consistent: the consumer misses exactly the acknowledged offsets the monitor "
            "reported lost, plus writes acknowledged after the monitor's last sample"
            + (f" ({unacked} offsets of the range were never acknowledged)" if unacked else ""),
            True,
        )
    incomplete = bool(loss) and all(f.details.get("leo_sampled") != "epoch" for f in loss)
    if 0 < committed <= held and accounted and below > 0 and incomplete:
        bounded = below <= max(5, committed // 50)
        return (
            f"UNDER-REPORTED by {below}: the consumer also misses {below} offsets below the "
            "reported range; the findings say their evidence was incomplete (judged on the "
            "new leader's LEO sample, no epoch record)"
            + ("" if bounded else f", beyond the {max(5, committed // 50)} allowed"),
            bounded,
        )
    if below > 0:
        return (
            f"UNDER-REPORTED by {below}: the consumer misses {below} offsets below the "
            "range the monitor reported as exact",
            False,
        )
    return (
        f"INCONSISTENT: reported {committed} committed / {held} held, the consumer missed "
        f"{seen} of them, {unacked} were never acknowledged, "
        f"{held - seen - unacked} acknowledged ones are still there; {after} above",
        False,
    )
