"""The demo's verdict on the monitor's loss report, against the consumer's read-back."""

from __future__ import annotations

from monitor.model import Finding


def loss_verdict(
    loss: list[Finding], committed: int, held: int, seen: int, after: int, consumer_lost: int
) -> tuple[str, bool]:
    """The demo's verdict on the monitor's loss report against the consumer's read-back.

    ``consistent``: every offset of the reported range ``[new leader's log end, old
    leader's last sampled LEO)`` was acknowledged to the demo's producer (it is the topic's
    only writer), so the consumer must miss exactly those, and the rest of what it misses
    lies above the range (acknowledged after the monitor's last sample of the old leader).
    A few acknowledgements may die with the leader's crash unlogged: 2 % slack, never more.

    ``UNDER-REPORTED`` passes only when the findings themselves say their evidence was
    incomplete -- no loss of the election was judged on the new leader's epoch record
    (``leo_sampled`` is never ``epoch``), so the count rests on a LEO sample that a restart
    truncation can undercut -- and by no more than 2 % of the reported count. Anything else
    (an over-report, an under-report the findings call exact) fails.

    >>> loss_verdict([], 0, 0, 0, 0, 5)[1]
    False
    """
    slack = max(5, held // 50)
    exact = 0 < committed <= held and held - slack <= seen <= held and seen + after == consumer_lost
    below = consumer_lost - seen - after
    if exact:
        return (
            "consistent: the consumer misses exactly the offsets the monitor reported "
            "lost, plus writes acknowledged after the monitor's last sample",
            True,
        )
    incomplete = bool(loss) and all(f.details.get("leo_sampled") != "epoch" for f in loss)
    if 0 < committed <= held and seen >= held - slack and below > 0 and incomplete:
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
        f"{seen} of them and {after} above",
        False,
    )
