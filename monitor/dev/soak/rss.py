"""Memory of the monitor's processes: the RSS of a process group, and whether it grew
after its warm-up."""

from __future__ import annotations

import os
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any


def group_rss(pgid: int) -> tuple[int, int]:
    """Total RSS (bytes) and number of the live processes in process group ``pgid``.

    A killed process not reaped yet (a zombie, or one being torn down) has no memory and is
    not counted: a group all of whose processes had just been killed (the soak's SIGKILL of
    the job) read as one of zero bytes -- a sample of a process that is gone."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) != pgid or fields[0] in ("Z", "X"):  # state, ppid, pgrp, ...
                continue
            resident = int(Path(f"/proc/{entry.name}/statm").read_text().split()[1])
        except (OSError, ValueError):
            continue  # gone meanwhile
        total += resident * page
        count += 1
    return total, count


def rss_summary(
    series: list[dict[str, Any]],
    warmup_s: float,
    tolerance: float,
    quiet_starts: list[float] | None = None,
) -> dict[str, Any]:
    """Per component and process incarnation: min/max, and the RSS growth over the part of
    its run that is judged, from the median of its first samples to the median of its last
    (up to three each, never the same ones):

    - the collector (a Python process: warm after its imports and first rounds) from the
      first quiet window that starts while it runs (``quiet_starts``). Every quiet window
      starts with the stack healthy and caught up: the same point of the run on any
      machine, however fast. The first collector runs from the stack's start into the
      first fault at least, so it always has that point and the samples after it: judged
      whenever two samples follow it.
    - the job's process group (a JVM grows its heap for minutes) after ``warmup_s`` of its
      run, when at least six samples span two minutes after that (the 30-minute soak)."""
    out: dict[str, Any] = {}
    for name in ("stream", "collector"):
        by_pid: dict[int, list[tuple[float, float]]] = defaultdict(list)
        for s in series:
            if name in s:
                by_pid[s[name]["pid"]].append((s["t"], s[name]["rss_mb"]))
        incarnations = []
        for pid, points in by_pid.items():
            start = points[0][0]
            inc: dict[str, Any] = {
                "pid": pid,
                "samples": len(points),
                "span_s": round(points[-1][0] - start, 1),
                "min_mb": min(v for _, v in points),
                "max_mb": max(v for _, v in points),
                "growth": None,
            }
            if name == "collector":
                warm_at = next((q for q in sorted(quiet_starts or []) if q >= start), None)
                after = [(t, v) for t, v in points if warm_at is not None and t >= warm_at]
                judged = len(after) >= 2
            else:
                warm_at = start + warmup_s
                after = [(t, v) for t, v in points if t >= warm_at]
                judged = len(after) >= 6 and after[-1][0] - after[0][0] >= 120
            if judged and warm_at is not None:
                k = min(3, len(after) // 2)
                first = statistics.median(v for _, v in after[:k])
                last = statistics.median(v for _, v in after[-k:])
                ts = [t for t, _ in after]
                vs = [v for _, v in after]
                slope = statistics.linear_regression(ts, vs).slope * 3600
                inc.update(
                    judged_from=round(warm_at, 1),
                    judged_samples=len(after),
                    first_mb=first,
                    last_mb=last,
                    growth=round((last - first) / first, 4),
                    slope_mb_per_h=round(slope, 1),
                    flat=(last - first) / first <= tolerance,
                )
            incarnations.append(inc)
        out[name] = {"incarnations": incarnations}
    return out
