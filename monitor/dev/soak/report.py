"""The soak's report on the terminal, from ``soak.json``'s content."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def print_report(r: dict[str, Any], say: Callable[[str], None], path: Path) -> None:
    say("\n== soak report")
    say(f"   {len(r['cycles'])} cycles in {r['duration_s'] / 60:.1f} min")
    say(f"   lab faults: {r['lab_faults']}   monitor faults: {r['monitor_faults']}")
    for c in r["cycles"]:
        say(
            f"   cycle {c['index']:>2} {c['lab_fault']:<11} "
            f"{'b' + str(c['victim']) if c['victim'] is not None else '--'} "
            f"+{'+'.join(m['name'] for m in c['monitor_faults']) or '-':<40} "
            f"detected {c['detection_s']} healed {c['resolved_s']}s "
            f"(+{c['healthy_s']}s all clear) "
            f"{'ok' if not c['problems'] else 'PROBLEMS'}"
        )
        for m in c["monitor_faults"]:
            say(f"        {m['name']}: back in {m['recovery_s']}s  {m['details']}")
    ft = r["findings_topic"]
    say(
        f"   findings topic: {ft['records']} records, {ft['unique_ids']} ids, "
        f"{ft['raw_duplicates']} raw duplicates (replays, identical: "
        f"{ft['duplicates_with_different_content'] == 0})"
    )
    say(f"   findings outside fault windows: {len(r['spurious_findings'])}")
    say(f"   alerts firing in quiet windows: {len(r['quiet_window_alerts'])}")
    if r["outage"]:
        say(f"   monitor outage: {r['outage']}")
    say(f"   pages delivered: {r['pages']}")
    for name, s in r["rss"].items():
        for inc in s["incarnations"]:
            say(
                f"   RSS {name:<9} pid {inc['pid']:>7}: {inc['samples']:>3} samples over "
                f"{inc['span_s'] / 60:5.1f} min, min {inc['min_mb']} max {inc['max_mb']} MB"
                + (
                    f", after warm-up {inc['first_mb']} -> {inc['last_mb']} MB "
                    f"({inc['growth']:+.1%}, {inc['slope_mb_per_h']:+.0f} MB/h)"
                    if inc.get("growth") is not None
                    else " (too short to judge)"
                )
            )
    for p in r["problems"]:
        say(f"   !! {p}")
    say(f"   verdict: {r['verdict'].upper()}   ({path})")
