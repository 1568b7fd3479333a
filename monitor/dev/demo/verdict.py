"""The demo's verdict on the monitor's loss report, against the consumer's read-back."""

from __future__ import annotations

from monitor.model import Finding


def held_ranges(loss: list[Finding]) -> list[tuple[int, int]]:
    """Each loss finding's offsets held by the old leader and not by the new one:
    ``[new leader's log end, + old_leader_offsets_lost)``, whose top is the old leader's last
    seen end -- its LEO sample or the committed HW it was last seen with, whichever is
    higher (the HW can be the newer sample). CI failed twice on the LEO sample alone as the
    top: the 18 and then 4 lost offsets between it and the HW were taken for writes
    acknowledged after the monitor's last sample."""
    return [
        (
            int(f.details["new_leader_leo"]),
            int(f.details["new_leader_leo"]) + int(f.details["old_leader_offsets_lost"]),
        )
        for f in loss
    ]


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

    ``consistent``: every offset of the reported range (:func:`held_ranges`) is either
    missed by the consumer (``seen``: acknowledged to the demo's producer, the topic's only
    writer, and gone) or was never acknowledged at all (``unacked``: appended by the old
    leader, whose answer died with it or came after the producer gave up -- counted from
    the producer's ack log, not allowed as a percentage), and the rest of what the consumer
    misses lies above the range (acknowledged after the monitor's last sample of the old
    leader). An offset of the range that was acknowledged and that the consumer still reads
    is an over-report.

    ``UNDER-REPORTED`` passes only when the findings themselves say their evidence was
    incomplete -- no loss of the election was judged on the new leader's epoch record
    (``leo_sampled`` is never ``epoch``), so the count rests on a LEO sample that a restart
    truncation can undercut -- and by no more than 2 % of the reported count. Anything else
    (an over-report, an under-report the findings call exact) fails.

    >>> loss_verdict([], 0, 0, 0, 0, 5)[1]
    False
    >>> loss_verdict([], 400, 500, 482, 40, 522, unacked=18)[1]
    True
    """
    accounted = seen + unacked == held
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
