"""Findings in plain sentences and aligned tables, for people (no I/O here)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from monitor.model.findings import Finding

_Summary = Callable[[dict[str, Any]], str]


def _isr(d: dict[str, Any]) -> str:
    return f"ISR {d.get('isr')} of {d.get('replicas')}"


SUMMARIES: dict[str, _Summary] = {
    "hw_lag": lambda d: (
        f"HW {d['hw']} stuck {d['hw_lag_ms'] / 1000:.0f}s behind leader LEO {d['leader_leo']} "
        f"({d['uncommitted']} uncommitted)"
    ),
    "follower_lag": lambda d: (
        f"{d['lag_offsets']} offsets / {d['lag_ms'] / 1000:.0f}s behind leader {d['leader']}"
        + (" while still in the ISR" if d.get("in_isr") else "")
    ),
    "isr_shrink": lambda d: f"ISR {d['isr_before']} -> {d['isr']} (removed {d['removed']})",
    "isr_expand": lambda d: f"ISR {d['isr_before']} -> {d['isr']} (added {d['added']})",
    "under_replicated": lambda d: f"{_isr(d)}, missing {d['missing']}",
    "under_min_isr": lambda d: (
        f"ISR size {d['isr_size']} < min.insync.replicas {d['min_isr']}: acks=all writes fail"
    ),
    "at_min_isr": lambda d: (
        f"ISR size {d['isr_size']} = min.insync.replicas: one more failure stops acks=all"
    ),
    "offline": lambda d: f"no leader (last leader {d['last_leader']}, {_isr(d)})",
    "leader_election": lambda d: (
        (
            "election of a replica outside the last ISR that rejoined with it (clean unless "
            "its log shows a loss)"
            if d.get("membership") == "rejoined_with_last_isr"
            else "reassignment handover (clean unless its log shows a loss)"
            if d.get("membership") == "reassigned_to"
            else "election outside the ISR seen, on a topic that forbids unclean elections "
            "(the ISR or ELR changed between two reads; clean unless its log shows a loss)"
            if d.get("membership") == "outside_last_isr_unclean_disabled"
            else f"{'clean' if d['clean'] else 'UNCLEAN'} election"
        )
        + f": leader {d['leader_before']} -> "
        f"{d['leader']}, epoch {d['epoch_before']} -> {d['epoch']}, "
        + (
            f"start offset {d['start_offset']}"
            if d["start_offset"] >= 0
            else "start offset not yet known (epoch record pending)"
        )
    ),
    "unclean_election": lambda d: (
        f"the controller counted {d['counted']} unclean election(s) (its counter "
        f"{d['counter_before']} -> {d['counter']}); partition not named by the counter"
        if d.get("witness") == "controller_counter"
        else f"UNCLEAN election: leader {d['leader']} was not in ISR {d['isr_before']} "
        f"(epoch {d['epoch']}"
        + (", and its log lacks committed offsets" if d.get("witness") == "loss" else "")
        + f"); its LEO {d['start_offset']} vs committed HW {d['committed_hw_before']}"
    ),
    "telemetry_inconsistent": lambda d: (
        f"{d['source']} {d['field']} {d['value']} contradicted by the reads around it; "
        "held back, never judged on"
    ),
    "election_unverified": lambda d: (
        f"leader {d['leader']} (epoch {d['epoch']}): loss not verified"
        + (
            f", at most {d['lost_at_most']} committed offsets"
            if d.get("lost_at_most") is not None
            else ""
        )
        + f" -- {d['why']}"
    ),
    "committed_data_loss": lambda d: (
        f"lost {d['lost_count']} committed offsets [{d['lost_from']}, {d['lost_to']}): new leader "
        f"{d['new_leader']} holds up to {d['new_leader_leo']}, HW was {d['committed_hw_before']}"
        + (
            f" (old leader held {d['old_leader_offsets_lost']} more at its last sample)"
            if d.get("old_leader_offsets_lost", 0) > d["lost_count"]
            else ""
        )
    ),
    "hw_regression": lambda d: (
        f"HW went back from {d['hw_before']} to {d.get('lowest_hw', d['hw'])}"
        f" ({d['regressed_by']} committed offsets)"
    ),
    "truncation_below_hw": lambda d: (
        f"LEO {d['leo_before']} -> {d['leo']}, below committed HW {d['committed_hw']} "
        f"({d['committed_offsets_removed']} committed offsets removed)"
    ),
    "log_divergence": lambda d: (
        f"replica LEO {d['leo']} vs leader {d['leader']} LEO {d['leader_leo']}: "
        f"logs differ from offset {d['diverges_from']}"
    ),
    "epoch_regression": lambda d: (
        f"leader epoch went back from {d['epoch_before']} to {d['epoch']}"
    ),
    "topic_recreated": lambda d: (
        f"topic deleted and recreated: id {d['topic_id_before']} -> {d['topic_id']}, epoch "
        f"{d['epoch_before']} -> {d['epoch']}; a new history (the old one had committed "
        f"up to {d['committed_hw_before']})"
    ),
    "reassignment": lambda d: (
        f"reassigning {[b for b in d['replicas'] if b not in d['adding']]} -> "
        f"{[b for b in d['replicas'] if b not in d['removing']]}: adding {d['adding']}, "
        f"removing {d['removing']}"
        + "".join(
            f"; broker {b} {c['remaining']} offsets to copy"
            for b, c in d["copied"].items()
            if c["remaining"] >= 0
        )
    ),
    "leader_flapping": lambda d: f"{d['elections']} elections in {d['window_ms'] / 1000:.0f}s",
    "stale_telemetry": lambda d: (
        "broker does not answer the collector"
        if d.get("alive") is False
        else f"no telemetry for {d['silent_for_ms'] / 1000:.0f}s"
    ),
    "durability_risk": lambda d: (
        f"{', '.join(d['reasons'])} (RF {d['replication_factor']}, "
        f"min ISR {d['min_insync_replicas']}, unclean {d['unclean_leader_election_enable']})"
    ),
}


def summary(f: Finding) -> str:
    """One line of what the finding says, with its numbers."""
    fn = SUMMARIES.get(str(f.kind))
    if fn is None:
        return ""
    try:
        return fn(f.details)
    except (KeyError, TypeError):
        return ", ".join(f"{k}={v}" for k, v in f.details.items())


def iso(ms: int) -> str:
    """A stamp (ms since the Unix epoch, UTC) as ISO 8601, for any the contract allows (up
    to 2^63-1: the year 292278994, which ``datetime`` cannot hold -- it stops at 9999, and
    the table output of ``replay`` and ``status`` crashed on a stamp past it). Years
    outside 0-9999 are written with a sign (ISO 8601's expanded years), as Java's
    ``Instant`` prints them.

    >>> iso(0)
    '1970-01-01T00:00:00.000Z'
    >>> iso(1_700_000_000_123)
    '2023-11-14T22:13:20.123Z'
    >>> iso(253_402_300_800_000)  # the first millisecond of the year 10000
    '+10000-01-01T00:00:00.000Z'
    >>> iso(2**63 - 1)
    '+292278994-08-17T07:12:55.807Z'
    """
    secs, milli = divmod(ms, 1000)
    days, rem = divmod(secs, 86_400)
    year, month, day = _civil_from_days(days)
    hour, rem = divmod(rem, 3_600)
    minute, second = divmod(rem, 60)
    y = f"{year:04d}" if 0 <= year <= 9999 else f"{year:+d}"
    return f"{y}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{milli:03d}Z"


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day count since 1970-01-01, proleptic Gregorian, for any
    integer (H. Hinnant's ``civil_from_days``: 400-year eras of 146,097 days).

    >>> _civil_from_days(0), _civil_from_days(-1), _civil_from_days(11_016)
    ((1970, 1, 1), (1969, 12, 31), (2000, 2, 29))
    """
    z = days + 719_468  # days since 0000-03-01
    era = z // 146_097
    doe = z - era * 146_097  # day of the era, 0-146096
    yoe = (doe - doe // 1_460 + doe // 36_524 - doe // 146_096) // 365  # year of the era
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)  # day of the year from March 1st
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def printable(text: str) -> str:
    r"""A cell as a terminal shows it safely: characters that are not printable (control
    characters, a cluster name's newline or escape sequence -- the contract allows any
    text there) escaped as Python writes them, everything else as is.

    >>> printable("lab"), printable("la\nb\x1b[2J")
    ('lab', 'la\\nb\\x1b[2J')
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """Left-aligned columns; the last column is not padded. Cells are :func:`printable`."""
    rows = [[printable(c) for c in row] for row in rows]
    widths = [len(h) for h in header]
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in [header, *rows]:
        cells = [c.ljust(widths[i]) for i, c in enumerate(row[:-1])] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def finding_row(f: Finding) -> list[str]:
    return [iso(f.at), f.severity.label, str(f.kind), str(f.state), f.subject, summary(f)]


FINDING_HEADER = ["AT", "SEVERITY", "KIND", "STATE", "SUBJECT", "SUMMARY"]
