"""The verdict of a soak, as ``soak.json`` holds it.

Every finding on the findings topic is attributed to the window its event time falls in.
Per lab fault, the findings the fault must cause on each partition it hits (the cycle's
``expected``, from ``REQUIRED``) must each appear exactly once (one id; a condition's open
and resolve once each), and nothing else but the fault's ``COLLATERAL``; nothing may appear
in a quiet window; the findings topic is read back raw at the end, and a finding id written twice (a
replayed micro-batch after a SIGKILL) must carry the same content both times. Components
must not exit on their own, /metrics must drop what the findings topic resolved, and the
RSS of the job and the collector must stay flat after their warm-up (:mod:`.rss`).
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from typing import Any

from monitor.dev.soak.plan import COLLATERAL, SoakPlan
from monitor.dev.soak.record import Record, Window
from monitor.dev.soak.rss import rss_summary


def judge(
    record: Record, plan: SoakPlan, raw: list[dict[str, Any]], pages: list[str]
) -> dict[str, Any]:
    """``soak.json``: the verdict, its problems and everything it was judged on, from the
    run's ``record`` and the findings topic read back ``raw``."""
    unique, copies, differing = read_back(raw)
    problems: list[str] = []
    sequence_errors, still_open = condition_sequence(unique)
    problems += sequence_errors
    if still_open:
        problems.append(f"conditions still open at the end: {still_open}")
    if differing:
        problems.append(f"{len(differing)} finding ids written twice with different content")
    # Attribution by event time.
    windows = [w for w in record.windows if w.end]
    spurious, setup_findings = attribute(unique, windows)
    for c in record.cycles:
        mine = [d for d in unique if c.fault.start - 1 <= d["at"] / 1000 <= c.fault.end]
        c.findings = [brief(d) for d in mine]
        c.matched = match(c.expected, mine, COLLATERAL[c.lab_fault])
        c.problems += c.matched.pop("problems")
        for mf in c.monitor_faults:
            if not mf.recovered:
                c.problems.append(f"{mf.name}: the monitor did not come back")
        problems += [f"cycle {c.index}: {p}" for p in c.problems]
    if spurious:
        problems.append(f"{len(spurious)} findings outside fault windows")
    if record.quiet_alerts:
        names = sorted({a["alert"] for a in record.quiet_alerts})
        problems.append(f"alerts firing in quiet windows: {names}")
    if record.unexpected_exits:
        problems.append(f"components exited on their own: {record.unexpected_exits}")
    if record.stale_metrics:
        problems.append(f"/metrics kept resolved conditions open: {record.stale_metrics}")
    if plan.outage_seconds > 0 and "error" in record.outage:
        problems.append(f"monitor outage: {record.outage['error']}")
    rss = rss_summary(
        record.rss, plan.warmup_seconds, plan.rss_tolerance, [c.quiet.start for c in record.cycles]
    )
    for name, s in rss.items():
        for inc in s["incarnations"]:
            if inc.get("flat") is False:
                problems.append(
                    f"{name} pid {inc['pid']}: RSS grew {inc['growth']:.0%} after warm-up "
                    f"(tolerance {plan.rss_tolerance:.0%})"
                )
    cycles = record.cycles
    covered = {mf.name for c in cycles for mf in c.monitor_faults}
    verdict = "pass" if not problems else "fail"
    return {
        "verdict": verdict,
        "problems": problems,
        "settings": plan.settings(),
        "duration_s": round(time.time() - record.t0, 1),
        "lab_faults": dict(Counter(c.lab_fault for c in cycles)),
        "monitor_faults": dict(Counter(mf.name for c in cycles for mf in c.monitor_faults)),
        "monitor_faults_covered": sorted(covered),
        "findings_topic": {
            "records": len(raw),
            "unique_ids": len(unique),
            "raw_duplicates": len(raw) - len(unique),
            "ids_written_more_than_once": sum(1 for n in copies.values() if n > 1),
            "duplicates_with_different_content": len(differing),
            "condition_sequence_errors": sequence_errors,
            "still_open": still_open,
        },
        "spurious_findings": spurious,
        "setup_findings": setup_findings,
        "quiet_window_alerts": record.quiet_alerts,
        "quiet_windows_s": [round(w.end - w.start, 1) for w in windows if w.kind == "quiet"],
        "cycles": [c.to_json() for c in cycles],
        "outage": record.outage,
        "pages": pages,
        "unexpected_exits": record.unexpected_exits,
        "stale_metrics": record.stale_metrics,
        "rss": rss,
        "rss_series": record.rss,
        "health_series": record.health,
        "alert_log": record.alert_log,
    }


def read_back(
    raw: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], Counter[str], list[str]]:
    """Each finding id once (its first copy), the copies of each id, and the ids whose
    copies differ."""
    first: dict[str, dict[str, Any]] = {}
    copies: Counter[str] = Counter()
    differing: list[str] = []
    for d in raw:
        copies[d["id"]] += 1
        if d["id"] in first:
            if json.dumps(first[d["id"]], sort_keys=True) != json.dumps(d, sort_keys=True):
                differing.append(d["id"])
        else:
            first[d["id"]] = d
    return list(first.values()), copies, differing


def condition_sequence(unique: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Conditions: open and resolve alternate per subject; a resolve closes its open.
    Returns the sequence errors and the conditions still open."""
    opened: dict[tuple[Any, ...], dict[str, Any]] = {}
    sequence_errors: list[str] = []
    for d in unique:
        if d["state"] == "event":
            continue
        key = (d["kind"], d["topic"], d["partition"], d["broker"])
        if d["state"] == "open":
            if key in opened:
                sequence_errors.append(f"{key} opened twice without a resolve")
            opened[key] = d
        else:
            o = opened.pop(key, None)
            if o is None or o["at"] != d["opened_at"]:
                sequence_errors.append(f"{key} resolved without its open")
    return sequence_errors, [str(k) for k in opened]


def attribute(
    unique: list[dict[str, Any]], windows: list[Window]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The findings outside every fault window (spurious), and those of the stack's
    start-up (reported, not judged)."""
    spurious: list[dict[str, Any]] = []
    setup_findings: list[dict[str, Any]] = []
    for d in unique:
        at = d["at"] / 1000
        w = next((w for w in windows if w.start - 1 <= at <= w.end), None)
        if w is not None and w.kind == "setup":
            setup_findings.append(brief(d))  # the stack starting: reported, not judged
        elif w is None or w.kind != "fault":  # quiet, the outage (a quiet lab), after
            spurious.append({**brief(d), "window": f"{w.kind}:{w.cycle}" if w else None})
    return spurious, setup_findings


def match(
    expected: dict[str, dict[str, str]], found: list[dict[str, Any]], collateral: frozenset[str]
) -> dict[str, Any]:
    """The ``expected`` findings (``{"topic/partition": {kind: "event" | "condition"}}``),
    each exactly once; nothing else but ``collateral``."""
    problems: list[str] = []
    counts: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(Counter))
    unexpected: list[str] = []
    for d in found:
        kind, where = d["kind"], f"{d['topic']}/{d['partition']}"
        if d["topic"] is not None and kind in expected.get(where, {}):
            counts[kind][where][d["state"]] += 1
        elif kind not in collateral:
            unexpected.append(f"{kind} {d['state']} {where} broker {d['broker']}")
    for where, kinds in expected.items():
        for kind, typ in kinds.items():
            got = dict(counts[kind][where])
            want = {"event": 1} if typ == "event" else {"open": 1, "resolved": 1}
            if got != want:
                problems.append(f"{kind} on {where}: {got or 'none'}, expected {want}")
    if unexpected:
        problems.append(f"unexpected findings: {unexpected}")
    return {
        "one_to_one": not problems,
        "required": {k: {w: dict(v) for w, v in ws.items()} for k, ws in counts.items()},
        "collateral": dict(Counter(d["kind"] for d in found if d["kind"] in collateral)),
        "problems": problems,
    }


def brief(d: dict[str, Any]) -> dict[str, Any]:
    """A finding's dict cut to what the report shows."""
    return {
        "id": d["id"],
        "kind": d["kind"],
        "state": d["state"],
        "topic": d["topic"],
        "partition": d["partition"],
        "broker": d["broker"],
        "at": d["at"],
    }
